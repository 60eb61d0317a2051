#!/bin/sh
# Runs after ovnbgp.service is READY (Type=notify).
say() { echo "u8check: $*" > /dev/ttyS0; }
pid=$(systemctl show -p MainPID --value ovnbgp)
systemctl status --no-pager -l ovnbgp 2>&1 | head -30 | while read -r l; do say "status: $l"; done
journalctl -b -u ovnbgp --no-pager -o cat 2>&1 | head -40 | while read -r l; do say "journal: $l"; done
say "ovnbgp $(systemctl show -p ActiveState,SubState,NRestarts ovnbgp | tr '\n' ' ') pid=$pid"
say "$(grep -E '^(Uid|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/$pid/status | tr '\n' ' ' | tr -s '\t' ' ')"
ok=
for i in $(seq 1 60); do
  if ip route show table 100 proto 200 | grep -q 198.51.100.0/24; then ok=1; break; fi
  sleep 1
done
say "kernel table 100: $(ip route show table 100 | tr '\n' ';')"
say "peers: $(/usr/local/bin/ovnbgp peers 2>&1 | tr '\n' ';')"
say "status: $(/usr/local/bin/ovnbgp status 2>&1 | tr '\n' ';')"
systemctl kill -s HUP ovnbgp; sleep 3
say "after reload: $(systemctl show -p ActiveState,NRestarts ovnbgp | tr '\n' ' ')"
say "listen: $(ss -ltnp 2>/dev/null | grep -E ':179 |:1179 ' | tr -s ' ' | tr '\n' ';')"
journalctl -u ovnbgp --no-pager -o cat 2>/dev/null | grep -iE 'error|denied|fail|EPERM' | head -20 | while read -r l; do say "log: $l"; done
[ -n "$ok" ] && say "VERDICT PASS" || say "VERDICT FAIL"
systemctl poweroff --no-block
