"""daemon/comm"""
