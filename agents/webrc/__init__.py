"""WEBRC, wave and equation based rate control (Luby et al., SIGCOMM 2002); see docs/webrc.md.

Importing the package registers the protocol ``webrc`` (wire id 3).
"""

from agents.webrc.protocol import SPEC, WEBRC_EXT, WebrcExt

__all__ = ["SPEC", "WEBRC_EXT", "WebrcExt"]
