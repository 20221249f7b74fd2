#!/usr/bin/env bash
# The soak (issue 40; docs/soak.md; not in CI): for each design, N minutes of traffic through
# `rqvs switch` on veths between private namespaces with flow-mod churn over OpenFlow
# (ovs-ofctl), a controller reconnecting every minute and a flapping port; at the end the
# exact-forwarding check on every frame, the per-port accounting, RSS and descriptor growth.
# The work is the ignored test `soak` of crates/cli/tests/soak.rs; this runs it per design.
#
#   scripts/soak.sh [--minutes N] [--design orig|ccache|cflows|auto|all]   (as root)
set -euo pipefail
minutes=30
designs=all
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="${2:?--minutes needs a number}"; shift 2 ;;
        --minutes=*) minutes="${1#*=}"; shift ;;
        --design) designs="${2:?--design needs a design}"; shift 2 ;;
        --design=*) designs="${1#*=}"; shift ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument '$1' (expected --minutes N, --design D)" >&2; exit 2 ;;
    esac
done
case "$minutes" in
    ''|*[!0-9.]*) echo "soak.sh: --minutes '$minutes': expected a positive number" >&2; exit 2 ;;
esac
[ "$designs" = all ] && designs="orig ccache cflows auto"
for d in $designs; do
    case "$d" in orig|ccache|cflows|auto) ;; *) echo "soak.sh: --design '$d': expected orig, ccache, cflows, auto or all" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (network namespaces)" >&2; exit 2; }
command -v ovs-ofctl >/dev/null || { echo "soak.sh: needs ovs-ofctl (apt-get install openvswitch-common)" >&2; exit 2; }
cd "$(dirname "$0")/.."
cargo test --release -p rqvs --test soak --no-run
status=0
for d in $designs; do
    echo "== soak: $d, $minutes min"
    if ! RQVS_REQUIRE_NETNS=1 RQVS_SOAK_DESIGN="$d" RQVS_SOAK_MINUTES="$minutes" \
        cargo test --release -p rqvs --test soak -- --ignored --nocapture soak 2>&1 | grep -E '^SOAK|^ +[0-9]+ +p|^rqvs switch|panicked|test result|mismatch|soak '; then
        status=1
    fi
done
exit $status
