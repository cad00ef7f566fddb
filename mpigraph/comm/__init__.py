"""comm"""
