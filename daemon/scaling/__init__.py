"""daemon/scaling"""
