"""Running on allocated hosts: inventories, the SSH executor, clock offsets, stand-in hosts.

``inventory`` maps a topology's nodes to machines (an Ansible inventory, a
CloudLab manifest RSpec or an Emulab node list); ``ssh`` runs commands and
long-lived processes on them and copies files; ``clocks`` measures each
host's clock against the controller, and ``timebase`` moves times
between the two with it; ``hosts`` and ``routers`` configure the
nodes and start their routing daemons over SSH; ``support`` finds what of an
experiment a run on hosts cannot do yet, before anything starts; ``standins`` makes network
namespaces with an sshd each that stand in for testbed hosts on one machine.
"""
