"""pyinfra facts the roles share, one module per family (as pyinfra files its own facts):
``nvidia``, ``kernel``, ``apt``, ``system``, ``pci``, ``virt``; ``_base`` holds what they share.
A fact only one role reads lives in that role.
"""
