from roles.common import common

common()
