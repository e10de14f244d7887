#!/usr/bin/env bash
# Run a command holding the build lock ($CACHE/build.lock), so that it never
# runs at the same time as another kernel build of these scripts:
#   ci/with-build-lock.sh make -C /var/tmp/restriper/linux O=/var/tmp/restriper/build/mine -j2
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
[ $# -gt 0 ] || { sed -n '2,4s/^# \{0,1\}//p' "$0"; exit 2; }
with_build_lock "$@"
