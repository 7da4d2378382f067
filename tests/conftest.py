"""Test-wide settings: helper modules in tests/ are importable by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
