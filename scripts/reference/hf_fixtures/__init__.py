"""Reference fixtures of Hugging Face model families for the runtime's checks (tests/fixtures/hf/).

Not run by CI: the tests read the committed files. See scripts/reference/README.md.
"""
