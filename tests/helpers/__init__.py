"""What the tests share besides fixtures: building repositories (`repos`) and running ralph in them (`running`)."""
