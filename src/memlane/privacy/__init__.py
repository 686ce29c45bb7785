"""What leaves the store and who may see it: erasing a user, applying a retention policy,
and the access rules of shared pools."""
