"""`batchval report`: the committee's report of a run (`report`, its headline, the
lender's pages and the streets' page) with its `charts`."""
