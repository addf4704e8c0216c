"""A recorded session replayed as collectors that keep its recorded timing."""
