"""`python -m mcclab`."""

from mcclab.cli import main

main()
