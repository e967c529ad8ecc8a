#!/usr/bin/env bash
# Refreshes advisories/, the copy of the RustSec advisory database that
# host/tests/advisories.rs checks Cargo.lock against offline: the advisories
# of every crate Cargo.lock names, and the list of those names (so the test
# can tell when a dependency was added after the last refresh).
#
#   scripts/refresh_advisories.sh PATH/TO/advisory-db   # a checkout of github.com/rustsec/advisory-db
#
# Run it when Cargo.lock gains a crate, and now and then for new advisories;
# then run `cargo nextest run --test advisories` and commit advisories/.
set -euo pipefail
cd "$(dirname "$0")/.."
db="${1:?usage: scripts/refresh_advisories.sh PATH/TO/advisory-db (a checkout of the RustSec advisory database)}"
[ -d "$db/crates" ] || { echo "$db: no crates/ folder: not a checkout of the RustSec advisory database" >&2; exit 1; }
names=$(grep -E '^name = "' Cargo.lock | sed -E 's/^name = "(.*)"$/\1/' | sort -u)
rm -rf advisories/crates
mkdir -p advisories/crates
for name in $names; do
    if [ -d "$db/crates/$name" ]; then
        cp -r "$db/crates/$name" "advisories/crates/$name"
    fi
done
echo "$names" > advisories/locked-crates.txt
commit=$(git -C "$db" log -1 --format='%H %cs' 2>/dev/null || echo "unknown (not a git checkout)")
cat > advisories/SOURCE <<SOURCE
RustSec advisory database (https://github.com/rustsec/advisory-db), crates/ of
the crates in Cargo.lock only; refreshed by scripts/refresh_advisories.sh.
advisory-db commit: $commit
SOURCE
echo "advisories/: $(find advisories/crates -name '*.md' | wc -l) advisories of $(ls advisories/crates | wc -l) crates (of $(echo "$names" | wc -l) in Cargo.lock)"
