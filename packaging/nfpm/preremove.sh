#!/bin/sh
# ovnbgp package: before removal (deb: remove, upgrade...; rpm: $1 = 0 on
# erase, 1 on upgrade). On removal only (not on an upgrade), disable the
# unit and stop a running daemon: its binary is about to go. With graceful
# restart the peers keep its routes for restartTime; imported routes stay
# (fail static).
set -e
case "$1" in
remove | 0)
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable ovnbgp.service >/dev/null 2>&1 || true
    if [ -d /run/systemd/system ]; then
      systemctl stop ovnbgp.service >/dev/null 2>&1 || true
    fi
  fi
  ;;
esac
exit 0
