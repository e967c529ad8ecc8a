#!/usr/bin/env bash
# What compiling costs, as the compile gate runs it (`mlrb __compile-component`,
# the child every compile of the mlrb binary goes through): wall seconds and
# peak resident memory of the largest honest component built here (a Python
# agent from componentize-py) and of compile bombs (one function with
# thousands of locals live across thousands of joins; tens of thousands of
# nested blocks), and the smallest
# address-space limit (in 256 MiB steps) the honest component compiles
# under. The gate's defaults (engine/gate.rs) are chosen from these figures.
#
#   scripts/bench_compile_gate.sh [MLRB_BINARY] [COMPONENT.wasm]
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
mlrb="${1:-$target/debug/mlrb}"
[ -x "$mlrb" ] || { echo "$mlrb: no mlrb binary: build one with cargo build -p mlrb-host" >&2; exit 1; }
honest="${2:-$(find "$target" -name '*.wasm' -size +1M -printf '%s %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2-)}"
[ -f "$honest" ] || { echo "no component over 1 MB under $target: build the agents (scripts/test.sh builds them) or name one" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Bombs, written byte by byte: a component holding one core module.
python3 - "$work" <<'PY'
import sys
def leb(n):
    out = bytearray()
    while True:
        b, n = n & 0x7f, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)
def sec(i, payload): return bytes([i]) + leb(len(payload)) + payload
def vec(items): return leb(len(items)) + b''.join(items)
def component(locals_decl, body):
    code = locals_decl + body + b'\x0b'
    core = (b'\0asm\x01\0\0\0' + sec(1, vec([b'\x60\0\0'])) + sec(3, vec([leb(0)]))
            + sec(10, vec([leb(len(code)) + code])))
    return b'\0asm\x0d\0\x01\0' + sec(1, core)
def join_bomb(n):
    # n locals live around a loop through n blocks that each join two paths.
    add = lambda i: b'\x20' + leb(i) + b'\x20' + leb((i + 1) % n) + b'\x7c\x21' + leb(i)
    body = b'\x03\x40'
    body += b''.join(b'\x02\x40\x20' + leb(j) + b'\xa7\x0d\x00' + add(j) + b'\x0b' for j in range(n))
    body += b''.join(add(i) for i in range(n)) + b'\x20\x00\xa7\x0d\x00\x0b'
    return component(vec([leb(n) + b'\x7e']), body)
def blocks_bomb(n):
    return component(vec([]), b'\x02\x40' * n + b'\x0b' * n)
for n in (2000, 4000, 6000):
    open(f'{sys.argv[1]}/join-{n}.wasm', 'wb').write(join_bomb(n))
for n in (50000, 200000):
    open(f'{sys.argv[1]}/blocks-{n}.wasm', 'wb').write(blocks_bomb(n))
PY

# One compile: "seconds peak-MiB exit"; $2 an address-space limit in MiB, or 0.
compile() {
    local wasm=$1 limit=$2 out="$work/out.cwasm"
    : > "$out"
    local prefix=()
    [ "$limit" -gt 0 ] && prefix=(prlimit --as=$((limit << 20)) --)
    local code=0
    /usr/bin/time -f '%e %M' -o "$work/time" timeout 180 "${prefix[@]}" "$mlrb" __compile-component \
        "$(stat -c %s "$wasm")" "$out" < "$wasm" > /dev/null 2> "$work/err" || code=$?
    read -r seconds kib < <(tail -1 "$work/time")
    echo "$seconds $((kib / 1024)) $code"
}

printf '%-44s %10s %10s %10s %8s\n' component bytes seconds peak-MiB exit
for wasm in "$honest" "$work"/join-*.wasm "$work"/blocks-*.wasm; do
    read -r seconds mib code < <(compile "$wasm" 0)
    printf '%-44s %10s %10s %10s %8s\n' "$(basename "$wasm")" "$(stat -c %s "$wasm")" "$seconds" "$mib" "$code"
done
for limit in $(seq 256 256 4096); do
    read -r seconds mib code < <(compile "$honest" "$limit")
    if [ "$code" = 0 ]; then
        echo "$(basename "$honest") compiles under an address-space limit of $limit MiB (and not under $((limit - 256)) MiB)"
        break
    fi
done
