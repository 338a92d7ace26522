module github.com/assignd/assignd/clients/go

go 1.19
