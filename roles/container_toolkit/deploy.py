from roles.container_toolkit import container_toolkit

container_toolkit()
