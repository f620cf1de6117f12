#!/bin/sh
# After removing sturdy. A purge (deb) also removes its state and log
# directories (the unit's StateDirectory and LogsDirectory) and its user
# and group, leaving the machine as it was before the install; an
# rpm erase keeps them, as rpm packages do.
set -e
case "$1" in
    purge)
        rm -rf /var/lib/sturdy /var/log/sturdy
        if getent passwd sturdy >/dev/null; then
            userdel sturdy >/dev/null 2>&1 || true
        fi
        if getent group sturdy >/dev/null; then
            groupdel sturdy >/dev/null 2>&1 || true
        fi
        ;;
esac
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
