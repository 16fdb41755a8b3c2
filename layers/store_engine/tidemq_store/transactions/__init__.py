"""Transactional messages (RocketMQ's half messages and check-back): see api.py."""
