# `make lint`: ruff's linter and its formatter's check over the Python sources (configured in
# pyproject.toml; notebooks and build products left out). `make test` runs it first; `make format`
# rewrites the sources as the formatter wants them (and applies the linter's safe fixes).
.PHONY: lint format
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
