"""slurm_plugin"""
