"""HTML pages: thin views over the same services and selectors the REST API uses."""
