#!/bin/sh
# ovnbgp package: after removal (deb: remove, purge, upgrade...; rpm: $1 = 0
# on erase, 1 on upgrade). Tells a running systemd that the unit is gone. A
# deb purge also removes the state systemd made for the unit: the drain
# state in /var/lib/ovnbgp and the runtime directory /run/ovnbgp
# (dpkg removes /etc/ovnbgp's config files itself).
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
  rm -rf /var/lib/ovnbgp /run/ovnbgp
fi
exit 0
