#!/bin/sh
# ovnbgp package: after install or upgrade (deb: configure; rpm: $1 = 1 or 2).
# Tells a running systemd about the unit and makes /run/ovnbgp. Never
# enables, starts or restarts the service: a routing daemon comes up when
# the operator says so (edit /etc/ovnbgp/config.yaml, then
# `systemctl enable --now ovnbgp`; after an upgrade, `systemctl restart
# ovnbgp`, which with graceful restart keeps the peers' routes).
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/ovnbgp.conf >/dev/null 2>&1 || true
fi
exit 0
