#!/usr/bin/env bash
# CI: render one `tuner report` from the committed store and open it in headless Chromium (Debian's package,
# installed here if missing, as .ci/run installs PostgreSQL): the page must load without a console message or
# a script error, and draw its figures (a screenshot that is not blank and holds the figures' colours).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if [ -n "${VIRTUAL_ENV:-}" ]; then PY=python; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m tuner report reduction --size large --dtype float32 -o "$work" --json >"$work/summary.json"
page=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["path"])' "$work/summary.json")

# --no-sandbox: CI runs as root; a fresh profile each run; --v=0 logs every console message as INFO:CONSOLE
browse=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
        --user-data-dir="$work/profile" --window-size=1280,4000)
timeout 120 "${browse[@]}" --enable-logging=stderr --v=0 --screenshot="$work/shot.png" "file://$page" \
    >"$work/chromium.log" 2>&1 || { cat "$work/chromium.log" >&2; echo "FATAL: chromium failed" >&2; exit 1; }
timeout 120 "${browse[@]}" --dump-dom "file://$page" >"$work/dom.html" 2>>"$work/chromium.log" \
    || { cat "$work/chromium.log" >&2; echo "FATAL: chromium --dump-dom failed" >&2; exit 1; }

"$PY" - "$work" <<'PY'
import json, re, sys
from pathlib import Path

import numpy as np
from matplotlib.image import imread

work = Path(sys.argv[1])
summary = json.loads((work / "summary.json").read_text())
log = (work / "chromium.log").read_text(errors="replace")
problems = []
# the page has no script: any console message (an error, an uncaught exception) is a fault
console = [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
problems += [f"console: {line}" for line in console]
dom = (work / "dom.html").read_text(errors="replace")
images = len(re.findall(r"<img [^>]*src=\"data:image/svg\+xml;base64,", dom))
if images != summary["figures"] or images < 3:
    problems.append(f"the loaded page holds {images} figure(s); the report wrote {summary['figures']}")
shot = imread(work / "shot.png")[..., :3]  # PNG: floats in 0..1
grey = shot.mean(axis=2)
coloured = float(((shot.max(axis=2) - shot.min(axis=2)) > 0.25).mean())  # the figures' blues, greens, viridis
print(f"browser check: {images} figure(s) loaded, screenshot {shot.shape[1]}x{shot.shape[0]}, "
      f"grey std {grey.std():.3f}, coloured pixels {100 * coloured:.1f}%, {len(console)} console message(s)")
if grey.std() < 0.05:
    problems.append(f"the screenshot is blank (grey std {grey.std():.4f})")
if coloured < 0.02:
    problems.append(f"the screenshot shows no figures ({100 * coloured:.2f}% coloured pixels)")
for p in problems:
    print("FAIL:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
