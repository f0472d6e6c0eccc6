"""daemon/history"""
