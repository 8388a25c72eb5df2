"""Imported first by the scripts that use PyTorch: without it installed, they stop here with how
to get it, instead of a traceback."""

import importlib.util
import os
import sys

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("numpy") is None:
    sys.exit(f"{os.path.basename(sys.argv[0])}: this script needs PyTorch and numpy "
             "(pip install torch numpy); see python/README.md")
