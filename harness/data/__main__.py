"""``python -m harness.data list | fetch NAME... | urls NAME...``: the dataset files a run reads."""

from harness.data.fetch.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
