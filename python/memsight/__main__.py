"""``python -m memsight ARGS``: the native program, as ``memsight ARGS``."""

import os
import sys

from ._binary import find_binary

if __name__ == "__main__":
    binary = find_binary()
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([binary, *sys.argv[1:]]))
    os.execv(binary, [binary, *sys.argv[1:]])
