"""clock"""
