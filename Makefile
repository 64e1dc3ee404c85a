# The README's two commands: `make demo` (install, then run the built-in example) and
# `make test` (every test). Everything else here is what they are made of.
PYTHON ?= python3
CARGO ?= cargo

.PHONY: demo test install rust-test py-test smoke bench

install:
	$(PYTHON) -m pip install --quiet -e '.[test]'

demo: install
	$(PYTHON) -m onionlab demo

rust-test:
	$(CARGO) test --workspace --all-targets --locked

py-test: install
	$(PYTHON) -m pytest -q

# A short run of the CLI, as a user would type it.
smoke: install
	$(PYTHON) -m onionlab demo --flows 4 --seconds 5 > /dev/null

test: rust-test py-test smoke

bench:
	$(CARGO) bench -p onionlab-core --bench event_queue
	$(CARGO) bench -p onionlab-net --bench transport
