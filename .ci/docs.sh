#!/usr/bin/env bash
# CI: build the documentation site (MkDocs, Material theme) with --strict: a broken link, a missing anchor or a
# page left out of the nav fails the build. Assumes the project's virtual environment is active (the reference
# pages are generated from tuner.cli and the space schema, so the project must be importable). The site goes to
# $SITE_DIR (default /tmp/tuner-site), never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

export NO_MKDOCS_2_WARNING=1  # Material's banner about MkDocs 2.0, not a warning of this build
pip install -q --no-compile 'mkdocs>=1.6,<2' 'mkdocs-material>=9.5,<10'  # --no-compile: see .ci/wheel.sh
mkdocs build --strict --site-dir "${SITE_DIR:-/tmp/tuner-site}"
