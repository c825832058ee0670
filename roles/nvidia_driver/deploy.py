from roles.nvidia_driver import nvidia_driver

nvidia_driver()
