"""The board side of a remote run: a collector agent that needs only the standard library, pyzmq and msgpack.

Copy this package (four files) to a board whose Python is old (the SVP boards of CANN's profiling guide ship
3.7.5), or install the ``[board]`` extra, and run ``python -m pipeline_board.agent``. Python 3.7 syntax throughout.
"""
