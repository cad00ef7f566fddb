"""shim"""
