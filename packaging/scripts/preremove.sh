#!/bin/sh
# Before removing sturdy (not before an upgrade): stop and disable it.
set -e
case "$1" in
    remove|0)
        if [ -d /run/systemd/system ]; then
            systemctl disable --now sturdy.service >/dev/null 2>&1 || true
        fi
        ;;
esac
exit 0
