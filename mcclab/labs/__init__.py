"""Classroom labs: the catalogue in ``labs/``, their checks, commands and handouts.

``model`` validates ``lab.yaml``, ``catalogue`` finds the labs and loads their
``checks.py`` by path, ``checks`` is the API a lab's checks are written
against, ``grade`` runs them, ``live`` starts and stops a lab's network, and
``handout`` renders the handout to HTML.
"""
