# The course book (`make book`): the widget renderer and weights, then Jupyter Book 1.x with warnings
# as errors into _build/html. Chapters execute at build (execute_notebooks: cache); the cache is
# cleared when the package or a checkpoint changes (scripts/book_assets.py --check-cache).
# `make book ASSESSED=1` (an assessed term, mk/release.mk): the package's listings come from its
# assessed edition, every graded answer's body folded out (scripts/book_assessed.py); the chapters
# still execute against the package itself, so every figure and output shows.
BOOK_OUT := _build
# the executed pages' figures: a CJK font after DejaVu Sans for the Chinese edition's labels
export MATPLOTLIBRC := $(abspath book/matplotlibrc)
# matplotlib's own font list, kept with the build and cleared with its cache: a font installed
# after an earlier build is found (matplotlib never rescans a font list it has saved)
export MPLCONFIGDIR := $(abspath $(BOOK_OUT)/.matplotlib)
NPM_STAMP := node_modules/.npm-ci-done

# npm ci: the exact front-end versions of package-lock.json (re-run when the lock changes): MathJax
# for the math typeset at build, axe-core for the browser tests.
$(NPM_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed to typeset the book's math (MathJax, at build): install Node.js with npm"; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund
	touch $@

# `make widgets`: each widget's ES modules bundled by esbuild (npm) into the one module anywidget loads,
# encdec/widgets/bundle/<name>.js, after constants.js is written from encdec/data.py
# (scripts/widgets_bundle.py; the widgets are listed once, in encdec/widgets/registry.py). Build
# products, never tracked: the book, the student wheel and the tests (tests/conftest.py) make them.
WIDGET_BUNDLES := encdec/widgets/bundle/.built
$(WIDGET_BUNDLES): $(filter-out encdec/widgets/constants.js,$(wildcard encdec/widgets/*.js)) encdec/widgets/registry.py \
		encdec/data.py scripts/widgets_bundle.py $(NPM_STAMP) | $(VENV)/.installed
	$(PY) scripts/widgets_bundle.py
	touch $@
.PHONY: widgets
widgets: $(WIDGET_BUNDLES)

# The notebook copies that the launch buttons open (Colab, Binder, JupyterHub need .ipynb): one
# per MyST notebook page, converted by jupytext without outputs, then given a first cell that
# installs the student wheel from the published site (book/launch_copies.py; its address comes
# from _config.yml's repository setting, else the checkout's GitHub origin, as the buttons' do:
# scripts/book_repository.py; with neither, the cell says how to install the wheel by hand).
# Committed, and written only by `make book-notebooks` (--update keeps their cell ids), never by a
# build: a build changes no tracked file. After editing a chapter, or setting the repository, run
# it and commit the copies; tests/test_book_content_launch.py fails when one lags behind.
NOTEBOOK_PAGES = $(shell grep -l '^jupytext:' book/*.md book/zh/*.md)
define LAUNCH_COPIES
$(BIN)/jupytext --quiet --update --to ipynb $(NOTEBOOK_PAGES)
$(PY) book/launch_copies.py $(NOTEBOOK_PAGES:.md=.ipynb)
endef

# The "ask the model" figure of a built page loads the site's one weights script (written with the
# widget assets, scripts/book_assets.py) instead of carrying the weights itself:
# encdec.widgets.export_weights.SITE_WEIGHTS_ENV names it, relative to the site's root. So does
# every figure with the site's one widgets.css (encdec.widgets._base.SITE_CSS_ENV), and with its
# widget's module, served once per site (SITE_ESM_ENV).
SITE_WEIGHTS := ENCDEC_SITE_WEIGHTS=_widget_assets/encdec-weights.js ENCDEC_SITE_CSS=_widget_assets/widgets.css \
	ENCDEC_SITE_ESM=_widget_assets/esm

define BUILD_BOOK
$(PY) scripts/book_assets.py --check-cache $(BOOK_OUT)
$(PY) book/zh_sync.py --check
$(PY) book/exercise_downloads.py
$(PY) -m encdec.whole_space
$(if $(filter 1,$(ASSESSED_TERM)),$(PY) -m autograder.assessed build/assessed/encdec --assessed '$(ASSESSED)')
ENCDEC_ASSESSED='$(ASSESSED)' $(SITE_WEIGHTS) $(BIN)/jupyter-book build . --path-output . --warningiserror --keep-going
$(BOOK_PDFS)
endef

# Each edition as one PDF, printed from the built site by headless chromium in _toc.yml order and
# merged with a bookmark per page (scripts/book_pdf.py), into the site: _downloads/encdec-book-en.pdf
# and -zh.pdf, which each edition's first page links. `make book-pdf` prints them again alone.
BOOK_PDFS = $(PY) scripts/book_pdf.py --html $(BOOK_OUT)/html

.PHONY: book-assets book-notebooks book-pdf
book-assets: $(VENV)/.installed $(NPM_STAMP) $(WIDGET_BUNDLES)
	$(PY) scripts/book_assets.py

book: $(VENV)/.installed $(NPM_STAMP) $(WIDGET_BUNDLES) system-book
	$(BUILD_BOOK)

book-notebooks: $(VENV)/.installed
	$(LAUNCH_COPIES)

book-pdf: $(VENV)/.installed system-book
	$(BOOK_PDFS)
