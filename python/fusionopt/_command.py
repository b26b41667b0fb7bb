"""The `fusionopt` command a pip installation puts on PATH: the CLI installed inside the package
(fusionopt/bin/fusionopt), run in this process's place."""
import os
import sys
from pathlib import Path


def main():
    binary = Path(__file__).resolve().parent / "bin" / "fusionopt"
    if not binary.exists():
        sys.exit(f"fusionopt: {binary} is missing: this copy of the package has no command-line tool "
                 "(a source checkout; build it with `make build`)")
    os.execv(binary, [str(binary), *sys.argv[1:]])
