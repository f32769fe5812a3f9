// a directory outside the order
