"""Export an experiment's resolved topology to a testbed: an Emulab NS file, a CloudLab profile.

``common`` turns a topology and its address plan into a testbed-neutral plan
(nodes, point-to-point links and LANs with per-direction parameters) and
collects refusals; ``ns`` renders the plan in Emulab's NS dialect and
``cloudlab`` as a geni-lib profile with its request RSpec. Each testbed module
refuses, by file, link and field, whatever its format cannot express, before
anything is written.
"""
