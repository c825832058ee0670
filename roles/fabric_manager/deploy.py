from roles.fabric_manager import fabric_manager

fabric_manager()
