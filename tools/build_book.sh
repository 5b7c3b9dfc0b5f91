#!/usr/bin/env bash
# Build the minitfm book, both editions: English into _build/html, Chinese into _build/html/zh_CN
# (open _build/html/index.html or _build/html/zh_CN/index.html afterwards; every page links to the
# same page in the other language).
#
#   bash tools/build_book.sh                     # incremental build of both editions
#   bash tools/build_book.sh --all               # rebuild every page
#   bash tools/build_book.sh --lang en           # one edition only (en or zh_CN; the Chinese one needs
#                                                #   the English site built before: it takes its anchors)
#   bash tools/build_book.sh --zh-allow-missing  # English where a translation is missing or stale
#                                                #   (development only: the published book has none)
#
# 1. Browser assets the site serves itself (no CDN): MathJax, RequireJS, the Jupyter widgets'
#    HTML manager.  Exact versions are pinned in tools/site/package-lock.json and installed with
#    `npm ci` (skipped when tools/site/node_modules already matches the lock file), then staged
#    into _build/site_assets/_assets/, which Sphinx copies into the site as _assets/.  The same
#    lock file pins axe-core, which only the site test uses: it goes to _build/test_assets/.
# 2. `jupyter-book build . -W --keep-going`: any warning (broken cross-reference, missing image,
#    notebook with an error output, missing asset) fails the build, after reporting them all.
#    Notebooks are not executed (they are committed executed and checked by pytest/nbval).
# 3. The Chinese edition: `python tools/i18n.py site` writes its Jupyter Book source tree into
#    _build/zh_src/ (the Chinese notebooks and pages from locale/zh_CN/, a _config.yml with
#    `language: zh_CN`, Chinese search, launch buttons on zh_CN/notebooks/), which is built the same
#    way (-W --keep-going) and copied to _build/html/zh_CN/. It refuses while a translation is
#    missing or stale, unless --zh-allow-missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

LANGS="en zh_CN"
ZH_FLAGS=()
JB_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lang) LANGS="$2"; shift 2 ;;
    --lang=*) LANGS="${1#--lang=}"; shift ;;
    --zh-allow-missing) ZH_FLAGS+=(--allow-missing); shift ;;
    *) JB_ARGS+=("$1"); shift ;;
  esac
done
for lang in $LANGS; do
  [[ "$lang" == en || "$lang" == zh_CN ]] || { echo "build_book.sh: --lang en or zh_CN, not $lang" >&2; exit 2; }
done

SITE="tools/site"
MODULES="$SITE/node_modules"
STAMP="$MODULES/.minitfm-package-lock.sha256"
STAGE="_build/site_assets/_assets"

command -v npm >/dev/null || { echo "build_book.sh: npm (Node.js 18+) is needed to fetch MathJax and the widget manager" >&2; exit 1; }
command -v jupyter-book >/dev/null || { echo "build_book.sh: jupyter-book not found; run: pip install -r requirements.txt" >&2; exit 1; }

lock_sum="$(sha256sum "$SITE/package-lock.json" | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$lock_sum" ]]; then
  echo "build_book.sh: browser assets already installed ($MODULES)"
else
  echo "build_book.sh: npm ci in $SITE"
  (cd "$SITE" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$lock_sum" > "$STAMP"
fi

# Stage only what pages load (about 10 MB): the MathJax component and the pieces it loads on
# demand (TeX extensions, CHTML fonts, menu, accessibility), RequireJS, the widgets' embed bundle
# and the icon fonts its CSS refers to.
rm -rf "_build/site_assets"
mkdir -p "$STAGE/mathjax/output" "$STAGE/widgets"
MJ="$MODULES/mathjax/es5"
cp "$MJ/tex-mml-chtml.js" "$MJ/startup.js" "$MJ/loader.js" "$MJ/core.js" "$STAGE/mathjax/"
cp -r "$MJ/input" "$MJ/a11y" "$MJ/ui" "$MJ/adaptors" "$MJ/sre" "$STAGE/mathjax/"
cp -r "$MJ/output/chtml" "$MJ/output/chtml.js" "$STAGE/mathjax/output/"
cp "$MODULES/mathjax/LICENSE" "$STAGE/mathjax/LICENSE"
cp "$MODULES/requirejs/require.js" "$STAGE/widgets/require.js"
HM="$MODULES/@jupyter-widgets/html-manager/dist"
cp "$HM/embed-amd.js" "$SITE/widgets-setup.js" "$STAGE/widgets/"
# The bundle's CSS asks for its icon fonts relative to the AMD module URIs of the widget packages;
# widgets-setup.js points RequireJS's base URL at _assets/widgets/, so they live here.
for dir in "$STAGE/widgets/@jupyter-widgets" "$STAGE/widgets/@jupyter-widgets/html-manager/dist"; do
  mkdir -p "$dir"
  cp "$HM"/*.woff2 "$HM"/*.woff "$dir/"
done
cp "$MODULES/@jupyter-widgets/html-manager/LICENSE" "$STAGE/widgets/LICENSE" 2>/dev/null || true
# The live model of the pages (minitfm/viz/live_model.py): its engine and each shipped model's weights as a script
# (header + base64), which a live explorer loads from _assets/live/ (a script, not a fetch: pages work from file://).
python -m minitfm.viz.live_model bundle "$STAGE/live"
# axe-core is for the site test only (tests/book/test_site.py injects it into each page to audit
# accessibility); it goes next to the site, not into it.
mkdir -p _build/test_assets
cp "$MODULES/axe-core/axe.min.js" "$MODULES/axe-core/LICENSE" _build/test_assets/

# Sphinx copies _static/ into the site on every build but never over a file already there: drop the
# copies first, so that an edited _static/minitfm.css reaches the pages of an incremental build.
if [[ " $LANGS " == *" en "* ]]; then
  start=$SECONDS
  rm -rf _build/html/_static
  jupyter-book build . -W --keep-going ${JB_ARGS[@]+"${JB_ARGS[@]}"}
  echo "build_book.sh: built _build/html in $((SECONDS - start)) s; open _build/html/index.html"
fi

if [[ " $LANGS " == *" zh_CN "* ]]; then
  start=$SECONDS
  [[ -f _build/html/notebooks/01_attention.html ]] || {
    echo "build_book.sh: the Chinese edition takes its heading anchors from the English site: build it first" >&2; exit 1; }
  python tools/i18n.py site _build/zh_src ${ZH_FLAGS[@]+"${ZH_FLAGS[@]}"}
  rm -rf _build/zh_out/_build/html/_static
  # Sphinx reads the Chinese book from _build/zh_src and writes it to _build/zh_out/_build/html
  jupyter-book build _build/zh_src --path-output _build/zh_out -W --keep-going ${JB_ARGS[@]+"${JB_ARGS[@]}"}
  rm -rf _build/html/zh_CN
  cp -r _build/zh_out/_build/html _build/html/zh_CN
  echo "build_book.sh: built _build/html/zh_CN in $((SECONDS - start)) s; open _build/html/zh_CN/index.html"
fi
echo "build_book.sh: _build/html is $(du -sh _build/html | cut -f1)"
