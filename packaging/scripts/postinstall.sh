#!/bin/sh
# After installing or upgrading sturdy: the sturdy system user, the state
# directory it owns, and systemd told about the unit. The service is not
# started on a first install: the default config listens on port 80, which
# another server may hold; 'systemctl enable --now sturdy' starts it.
set -e

if ! getent group sturdy >/dev/null; then
    groupadd --system sturdy
fi
if ! getent passwd sturdy >/dev/null; then
    useradd --system --gid sturdy --home-dir /var/lib/sturdy --no-create-home \
        --shell /usr/sbin/nologin --comment "sturdy reverse proxy" sturdy
fi
chown sturdy:sturdy /var/lib/sturdy
chmod 0750 /var/lib/sturdy

# First install (deb: "configure" with no old version; rpm: 1): let the
# service read a config that may come to hold admin.token, and nobody else.
first=no
case "$1" in
    configure) [ -z "$2" ] && first=yes ;;
    1) first=yes ;;
esac
if [ "$first" = yes ]; then
    chgrp sturdy /etc/sturdy/sturdy.yaml
    chmod 0640 /etc/sturdy/sturdy.yaml
fi

if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ "$first" = yes ]; then
        echo "sturdy: edit /etc/sturdy/sturdy.yaml, check it with 'sturdy check -c /etc/sturdy/sturdy.yaml', then: systemctl enable --now sturdy"
    else
        systemctl try-restart sturdy.service >/dev/null 2>&1 || true
    fi
fi
exit 0
