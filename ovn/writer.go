package ovn

import (
	"context"
	"errors"

	"github.com/ovnbgp/ovnbgp/model"
)

const defaultBatchSize = 500

// ApplyRoutes is not written yet.
func (c *Client) ApplyRoutes(ctx context.Context, node string, ops []model.OVNOp, guards []model.OVNGuard) ([]model.OVNOp, error) {
	return nil, errors.New("not implemented")
}
