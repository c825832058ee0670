from roles.slurm import slurm

slurm()
