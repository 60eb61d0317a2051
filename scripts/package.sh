#!/usr/bin/env bash
# package.sh BIN OUTDIR - build ovnbgp's deb and rpm from the binary BIN
# into OUTDIR with nfpm (pinned in tools/go.mod; `make package` runs this).
#
# Staged next to the repository's files (packaging/nfpm/nfpm.yaml lists
# them): the unit with ExecStart=/usr/bin/ovnbgp (packaging/systemd's unit
# runs /usr/local/bin/ovnbgp, where a hand install and the RHCOS
# MachineConfig put it), and what BIN itself generates from its command
# tree, so they match it: bash, zsh and fish completions and man pages
# (dated by the commit, so a rebuild is byte for byte the same).
#
# The package version comes from `BIN version` (see below): v1.2.3 gives
# 1.2.3, no tag gives 0.0.0~git<commit date>.<hash>.
set -euo pipefail

bin=${1:?usage: package.sh BIN OUTDIR}
out=${2:?usage: package.sh BIN OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-go}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/completion" "$stage/man" "$out"
out=$(cd "$out" && pwd)

install -m 0755 "$bin" "$stage/ovnbgp"
unit=$root/packaging/systemd/ovnbgp.service
grep -q '^ExecStart=/usr/local/bin/ovnbgp ' "$unit" || { echo "package.sh: $unit: no ExecStart=/usr/local/bin/ovnbgp to rewrite" >&2; exit 1; }
sed 's#^ExecStart=/usr/local/bin/ovnbgp #ExecStart=/usr/bin/ovnbgp #' "$unit" >"$stage/ovnbgp.service"

"$stage/ovnbgp" completion bash >"$stage/completion/ovnbgp.bash"
"$stage/ovnbgp" completion zsh >"$stage/completion/_ovnbgp"
"$stage/ovnbgp" completion fish >"$stage/completion/ovnbgp.fish"

json=$("$stage/ovnbgp" version -o json)
field() { sed -n "s/^  \"$1\": \"\(.*\)\",\{0,1\}$/\1/p" <<<"$json"; }
version=$(field version) commit=$(field commit) date=$(field commitDate)
epoch=$(date -d "${date:-@0}" +%s 2>/dev/null || echo 0)
SOURCE_DATE_EPOCH=$epoch "$stage/ovnbgp" gendocs --man "$stage/man"
gzip -9n "$stage"/man/*.1

# deb and rpm order "~" before and "+" after the release: v1.3.0-rc.1 is
# 1.3.0~rc.1 (before 1.3.0), v1.2.3-4-gabcdef (git describe: 4 commits
# after v1.2.3) is 1.2.3+git4.gabcdef (after it). No "-": rpm forbids it.
v=${version#v} suffix=
[[ $v == *-dirty ]] && v=${v%-dirty} suffix=.dirty
if [[ $v =~ ^(.*)-([0-9]+)-(g[0-9a-f]+)$ ]]; then
  v=${BASH_REMATCH[1]} suffix=+git${BASH_REMATCH[2]}.${BASH_REMATCH[3]}$suffix
elif [[ -n $suffix ]]; then
  suffix=+dirty
fi
if [[ $v =~ ^([0-9]+\.[0-9]+\.[0-9]+)(-(.+))?$ ]]; then
  pkgversion=${BASH_REMATCH[1]}
  [[ -n ${BASH_REMATCH[3]} ]] && pkgversion+="~${BASH_REMATCH[3]//-/.}"
  pkgversion+=$suffix
else # no tag: git describe --always gives the hash
  pkgversion=0.0.0~git$(date -u -d "@$epoch" +%Y%m%d%H%M%S).${commit:0:12}
  [[ $version == *dirty* ]] && pkgversion+=.dirty
fi
case $("$go" env GOARCH) in
amd64 | arm64 | ppc64le | s390x) arch=$("$go" env GOARCH) ;;
*) echo "package.sh: unsupported GOARCH $("$go" env GOARCH)" >&2; exit 1 ;;
esac

"$go" -C "$root/tools" build -o "$stage/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm
cd "$root" # nfpm.yaml's repository paths are relative
export OVNBGP_STAGE=$stage OVNBGP_PKG_VERSION=$pkgversion OVNBGP_ARCH=$arch
for p in deb rpm; do
  "$stage/nfpm" package --config "$root/packaging/nfpm/nfpm.yaml" --packager "$p" --target "$out/"
done
