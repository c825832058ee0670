from roles.munge import munge

munge()
